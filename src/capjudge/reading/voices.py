"""Numbers another voice gives, blanked before any reading (corpus AI).

One answer may hold several evaluators: samples of a self-consistency run, a panel's reviewers,
a debate's advocate and critic, an agent framework's speakers, another judge quoted ("GPT-4
rated this 85; I disagree"), a human rater, the user. Their numbers are not the judge's verdict
until the judge makes one its own, so they are blanked like the other things a careful reader
skips (:mod:`capjudge.reading.masking`):

- a line opened by another voice's name: "Reviewer 1: 4", "Sample 2 - 75", "Strict reviewer
  (harsh): 60", "critic (to chat_manager): 3", "GPT-4: 85", "评委一：3", "평가자 A: 5";
- a clause in which another voice rates: "Another evaluator rated this text 5", "GPT-4 gave it
  85", "the user suggested 90", "rated 85 by GPT-4V", "GPT-4's score of 85";
- the lines under a heading that gives them to another voice: "GPT-4's earlier evaluation:";
- the judge's own earlier voice, which what follows supersedes: "Previous round: The final
  score is $74$.", "Previous rating: 5. Changed to 4", "Initial: 4".

The voice that decides for the judge is its own and stays: "Chair: 70", "Final (chair): 70",
"Judge: 72", "Consensus: 4", "Majority: 80", "arbiter (to chat_manager): 4", "Editor's decision:
78". A voice's line that names the method's criteria ("Persona 1: Accuracy $80$, Completeness
$70$") splits the verdict between voices, and stays too. Where the judge adopts another's value
without writing it again ("I agree with Reviewer 2"), nothing is left to read: the reader
abstains (a safe miss), never reads the other voice's number as the judge's.
"""

from __future__ import annotations

import re

from capjudge.reading.view import blank
from capjudge.reading.vocabulary import ANY_CRITERION

# The roles that speak with an index telling them apart: "Reviewer 1", "Sample 3", "Persona B".
_INDEXED_NOUNS = (r"reviewer|annotator|rater|evaluator|grader|assessor|critic|sample|pass|run|"
                  r"attempt|trial|draw|persona|expert|voter|panelist|panellist|juror|judge|model|"
                  r"agent|round|iteration")
_INDEXED_ROLE = rf"(?:{_INDEXED_NOUNS})[\s_#-]*(?:\d+|[A-Z]\b)"
# Other evaluators by role, with the number or letter that tells them apart.
_ROLE = (r"(?:(?:two|three|four|five|six|seven|eight|nine|ten|both|all|\d+)[\s_-]+)?"
         r"(?:(?:strict|lenient|harsh|generous|senior|junior|first|second|third|other|expert|"
         r"human|crowd|external|independent|skeptical|sceptical|optimistic|pessimistic)[\s_-]+)?"
         rf"(?:{_INDEXED_NOUNS}|advocate|defen[cs]e|prosecut\w*|devil['\u2019]s\s+advocate|"
         r"worker|crowdworker|votes?|tally|"
         r"\w+_agent|\w+_critic|\w+_reviewer|checker|counter|labeler|labeller)s?"
         r"(?:[\s_#-]*(?:\d+|[A-Z]\b|one|two|three|four|five|I{1,3}V?|IV))?")
# The judge's own earlier voice, superseded by what follows: "Previous round: ... $74$",
# "Previous rating: 5. Changed to 4", "Initial: 4", "Initial automated score: 88".
# (Not "Original caption score:": the candidate is the original caption.)
_EARLIER = (r"(?:previous|prior|earlier|original|old|initial|first)"
            r"(?:\s+(?!caption|description|text|image|photo|video)\w+)?\s+(?:round|"
            r"evaluation|assessment|verdict|scores?|ratings?|review|answer|judge?ment|pass|"
            r"attempt|run|take|draft)|initial(?=[ \t]*[:\uff1a])")
# Other models by name.
_MODEL = (r"(?:GPT-?\d[\w.-]*|o\d(?:-mini)?|Claude(?:[\s-][\w.]+)?|Gemini(?:[\s-][\w.]+)?|"
          r"LLaVA[\w.-]*|Qwen[\w.-]*|InternVL[\w.-]*|Llama[\w.-]*|CLIPScore|CIDEr)")
# CJK panel members: "评委一", "评审员2", "評価者A", "평가자 A", "심사위원 1".
_CJK_ROLE = (r"(?:评委|評委|评审(?:员)?|評審(?:員)?|审稿人|标注员|標註員|注释者|評価者|注釈者|"
             r"アノテーター|レビュアー|審査員|평가자|심사위원|검토자|리뷰어|주석자|어노테이터)"
             r"\s*(?:[一二三四五\d]+|[A-Za-z])?"
             # and other European languages' reviewers: "Gutachter 1", "évaluateur B"
             r"|(?:gutachter(?:in)?|prüfer(?:in)?|bewerter(?:in)?|évaluateur|evaluateur|"
             r"relecteur|correcteur|evaluador(?:a)?|revisor(?:a)?|revisore|valutatore|"
             r"recensore|avaliador(?:a)?)s?(?:[\s#-]*(?:\d+|[A-Z]\b))?")
# The voice that decides: the judge's own.
_DECIDES = re.compile(r"\b(?:final|consensus|chair\w*|arbiter|arbitrator|moderator|manager|"
                      r"majority|median|mean|average|aggregat\w*|reconcil\w*|verdict|"
                      r"overall|decision|adjudicat\w*|meta-?review\w*|my|own|self)\b"
                      r"|^\s*judge\s*$|最终|最終|최종|議長|主席|综合|総合|종합|합의|"
                      r"\b(?:entscheidung|vorsitz\w*|endg[üu]ltig\w*|d[ée]cision|d[ée]finiti\w*|"
                      r"decisi[óo]n|presiden\w*|definitiv\w*)", re.I)
# A voice's label opening a line: the role, an aside in brackets ("(strict)", "(to
# chat_manager)"), then its separator.
_VOICE_LINE = re.compile(
    rf"(?:^|(?<=[|;,\u2192])|(?<=[.!?]\s))[ \t>*_#|-]*(?:\d+[.)][ \t]*)?[*_`\[]*"
    rf"(?P<voice>{_ROLE}|{_MODEL}|{_CJK_ROLE}|{_EARLIER})"
    r"(?:['\u2019]s\s+(?:\w+\s+)?(?:score|rating|verdict|take|view|vote|answer|evaluation|"
    r"assessment|review|counts?|output|response)s?)?[*_`\]]*"
    r"[ \t]*(?:\([^)\n]{0,80}\)|\[[^\]\n]{0,40}\])?[ \t]*[*_`]*[ \t]*"
    r"(?:(?:would|might|could|will)\s+(?:say|give|rate|score)[ \t]*|(?:says|said|thinks|"
    r"thought|gives|gave|rates|rated)[ \t]*)?"
    r"(?:[:\uff1a=\u2192|]|-{1,2}\s|\u2014|\u2013|\bsays\b|\bvotes?\b|(?<=\])(?=[ \t]))",
    re.I | re.M)
# A voice that rates in prose: "Another evaluator rated this text 5", "GPT-4 gave it 85",
# "the user suggested 90", "a human rater scored it 60"; "rated 85 by GPT-4V".
# ("the model" alone is the captioner more often than a judge, and "the judge" may be the
# judge itself in a persona: only another, previous, second ... one of them is another voice.)
_OTHER = (rf"(?:(?:another|the\s+other|a\s+previous|the\s+previous|an\s+earlier|the\s+earlier|"
          rf"a\s+second|the\s+second|the\s+first|a\s+different|an\s+automated|an\s+external)"
          rf"\s+(?:\w+\s+)?(?:evaluator|judge|reviewer|rater|annotator|model|grader|assessor|"
          rf"critic|crowdworker|worker|expert|labell?er|system)s?"
          rf"|(?:one|a|the|some|both|all|several|multiple|two|three|four|five|\d+)\s+"
          rf"(?:\w+\s+)?(?:evaluator|reviewer|rater|annotator|grader|"
          rf"assessor|crowdworker|labell?er)s?"
          rf"|{_MODEL}|the\s+user|a\s+human(?:\s+rater)?|human\s+(?:raters?|annotators?)|"
          rf"crowdworkers?|annotators?)")
_RATED_BY_OTHER = re.compile(
    rf"\b{_OTHER}\b[^.;!?\n\d]{{0,40}}?\b(?:rated|scored|gave|gives|assigned|suggested|"
    rf"suggests|proposed|proposes|put|awarded|marked|graded|landed|settled|went\s+with|"
    rf"voted|says|said|thinks|thought)\b"
    rf"|\b(?:rated|scored|given|graded|marked)\s+[$*_`]*\d+(?:\.\d+)?[$*_`]*(?:\s*/\s*\d+)?"
    rf"\s+by\s+{_OTHER}"
    rf"|\b{_OTHER}['\u2019]s?\s+(?:\w+\s+)?(?:score|rating|verdict|grade|vote|number|value)s?\b"
    # another's evaluation: "A previous evaluation by GPT-4V concluded: ..."
    rf"|\b(?:evaluation|assessment|review|verdict|answer|rating|judge?ment)\s+(?:by|from)\s+"
    rf"{_OTHER}"
    # the judge speaking as one of several: "As Reviewer 1, I'd give 90."
    # (with its index: "As the judge, ..." and "As a reviewer, ..." are the judge itself)
    rf"|\bas\s+{_INDEXED_ROLE}\s*,",
    re.I)
# A heading that gives the lines under it to another voice: "GPT-4's earlier evaluation:",
# "The other judge's answer:", "Reviewer 2's scores:".
_VOICE_HEADING = re.compile(
    rf"^[ \t>*_#-]*(?:{_OTHER}|{_ROLE})['\u2019]s?\s+(?:\w+\s+)?(?:evaluation|assessment|answer|"
    r"output|scores?|ratings?|verdict|review|response|counts?)(?:\s+(?:of|for)\s+(?:this|the)"
    r"\s+\w+)?[*_`]*[ \t]*[:\uff1a]?[ \t]*$",
    re.I | re.M)
# A voice's name alone leading its lines, a paragraph or a section: "Persona A (strict):",
# "**Strict reviewer.** The caption ...", "# Agent: Reader", "### Reviewer 2".
_VOICE_LEAD = re.compile(
    r"^[ \t>#]*[*_]*(?:agent[ \t]*[:\uff1a][ \t]*[^\n\d:]{1,40}?[ \t]*[*_]*[ \t]*$|"
    rf"(?P<lead>[*_]{{1,2}})?(?:{_ROLE}|{_MODEL}|{_CJK_ROLE})"
    r"[ \t]*(?:\([^)\n]{0,40}\))?[ \t]*[:.\uff1a]?[ \t]*"
    r"(?:[*_]*[ \t]*$|(?(lead)[*_]{1,2}[ \t]+|(?!))))",
    re.I | re.M)
# A line a deciding voice opens: its name before the colon ("Reconciled (my final answer):",
# "Final: ...", "# Agent: Crew Manager"); what it says follows (``rest``).
_DECIDER_LINE = re.compile(r"^[ \t>#*_-]*(?P<name>[^\n:\uff1a]{1,50})[:\uff1a.]?(?P<rest>[^\n]*)$",
                           re.M)
# Where a voice's block ends: a blank line.
_BLOCK_END = re.compile(r"\n[ \t]*\n")
# The method's criteria, in every language the vocabulary knows: a voice's line that names
# them splits the verdict between voices ("Persona 1: Accuracy $80$ ...").
# (A criterion's label: its name, then a separator or the value; not "correct" in prose.)
_CRITERION = re.compile(rf"(?:{ANY_CRITERION.pattern})\w*[\s*_`]*[:=\uff1a$\d]", re.I)
_DIGIT = re.compile(r"\d")
# A voice named with digits: "Reviewer 2", "Sample 3", "GPT-4o", "Claude 3.5".
_NAMED = re.compile(rf"\b(?:{_INDEXED_ROLE}|{_MODEL})", re.I)
# A numbered round or iteration: "Round 2", "iteration 3".
_ROUND = re.compile(r"\b(?:round|iteration)[\s#-]*(\d+)\b", re.I)
# Where a voice's line turns to the next voice: a bar, an arrow, a semicolon, a comma, a
# sentence's end; or, for a voice named in the plural, only a sentence's end.
_TURN = re.compile(r"[|;\u2192\u21d2]|->|=>|(?<!\b[A-Z])[.!?](?=\s|$)|\s[-\u2013\u2014]\s|"
                   r",\s*(?=(?:but|while|whereas|though|yet|I|my|so|hence|therefore|overall|"
                   r"final|consensus|majority)\b)")
_SENTENCE_TURN = re.compile(r"[|;\u2192\u21d2]|->|=>|(?<!\b[A-Z])[.!?](?=\s|$)")
# What the voice is quoted saying, up to the closing mark: ' concluded: "... $85$."'.
_QUOTED_AFTER = re.compile(r"[^\n\"\u201c]{0,40}?[:,]?\s*(?:\"[^\"\n]*\"|\u201c[^\u201d\n]*\u201d)")
# Where a rating clause ends: a sentence end, a semicolon, a turn ("; I disagree", ", but I").
_CLAUSE_END = re.compile(r"[.!?](?=\s|$)|;|\n|,\s*(?:but|while|whereas|though|yet)\b|"
                         r"\s(?:but|while|whereas)\s+I\b|\u2014|\s-\s", re.I)


def _voice_lines(text: str) -> str:
    """Another voice's name and what it says, blanked.

    To the end of its line, or to where the line turns to the next voice ("Sample 1: 70 |
    Sample 2: 75 -> majority: 70", "Annotator 1: 4, Annotator 2: 5. Consensus: 4"); a voice
    named in the plural ("Samples: 4, 5, 5. Mean ...") speaks to the end of its sentence.
    """
    rounds = [int(n) for n in _ROUND.findall(text)]
    for m in list(_VOICE_LINE.finditer(text)):
        voice = m.group("voice")
        line_end = text.find("\n", m.end())
        line_end = len(text) if line_end < 0 else line_end
        if re.fullmatch(r"agents?", voice, re.I):
            continue  # "# Agent: Reader": a heading, its section is the blocks' business
        if re.fullmatch(_MODEL, voice, re.I) and m.group(0).rstrip(" \t").endswith("]"):
            continue  # "[llava-v1.6-34b] 78": the server's tag for the judge itself
        if (n := _ROUND.match(voice)) is not None:
            # Rounds supersede one another: the last stands, and an earlier one's line goes
            # to the next round's name ("Round 1: ... Score: 70 -> Round 2: 78").
            if int(n.group(1)) >= max(rounds):
                continue
            later = _ROUND.search(text, m.end(), line_end)
            text = blank(text, m.start("voice"), later.start() if later else line_end)
            continue
        if _DECIDES.search(voice) or _DECIDES.search(text[m.start(): m.end()]):
            continue
        if _CRITERION.search(text, m.end(), line_end) and not _decided_after(text, line_end):
            continue  # "Persona 1: Accuracy $80$ ...": the criteria shared out, no one decides
        turn = (_SENTENCE_TURN if re.search(r"s\W*$", voice, re.I) else _TURN).search(
            text, m.end(), line_end)
        # The voice's name goes too: its number ("Sample 2") tells voices apart, rates nothing.
        text = blank(text, m.start("voice"), turn.start() if turn else line_end)
    return text


def _voice_clauses(text: str) -> str:
    """Clauses in which another voice rates, their numbers blanked."""
    for m in list(_RATED_BY_OTHER.finditer(text)):
        # From the voice on ("The final score is $60$, although the user suggested $95$"
        # keeps the judge's own value).
        start = m.start()
        quoted = _QUOTED_AFTER.match(text, m.end())
        stop = _CLAUSE_END.search(text, quoted.end() if quoted else m.end())
        end = stop.start() if stop else len(text)
        if _DIGIT.search(text, start, end):
            text = blank(text, start, end)
    return text


def _voice_blocks(text: str) -> str:
    """What a heading gives to another voice, blanked: its paragraph, or its section.

    "GPT-4's earlier evaluation:" and the lines under it; "Persona A (strict):" and its
    lines; "**Strict reviewer.** ... The final score is $60$." (a paragraph led by the voice);
    "# Agent: Reader" and its section, to the next heading. A heading of the deciding voice
    ("Reconciled (my final answer):", "# Agent: Crew Manager") is the judge's own.
    """
    last_round = max((int(n) for n in _ROUND.findall(text)), default=0)
    for m in list(_VOICE_HEADING.finditer(text)) + list(_VOICE_LEAD.finditer(text)):
        if _DECIDES.search(m.group(0)):
            continue
        stop = _BLOCK_END.search(text, m.end())
        end = stop.start() if stop else len(text)
        if (n := _ROUND.search(m.group(0))) is not None:
            # "Round 1:" alone on its line: superseded by the next round, which stands.
            if int(n.group(1)) < last_round:
                later = _ROUND.search(text, m.end(), end)
                text = blank(text, m.start(), later.start() if later else end)
            continue
        if m.re is _VOICE_LEAD and _CRITERION.search(text, m.end(), end) and \
                not _decided_after(text, end):
            continue  # the judge's own voices sharing the criteria out ("accuracy_agent: ...")
        text = blank(text, m.start(), end)
    return text


def _decided_after(text: str, pos: int) -> bool:
    """Whether a deciding voice states values after ``pos`` ("Reconciled: Accuracy: $75$")."""
    for m in _DECIDER_LINE.finditer(text, pos):
        if not _DECIDES.search(m.group("name")):
            continue
        stop = _BLOCK_END.search(text, m.end())
        if _DIGIT.search(text, m.start("rest"), stop.start() if stop else len(text)):
            return True
    return False


def _voice_names(text: str) -> str:
    """The digits of a voice's name blanked wherever it is named.

    "I side with Reviewer 2", "I agree with GPT-4", "Round 2 (after rebuttal): 74": its index
    is no rating.
    """
    for m in list(_NAMED.finditer(text)):
        if _DIGIT.search(m.group(0)):
            text = blank(text, m.start(), m.end())
    return text


def mask_voices(text: str) -> str:
    """``text`` with the numbers of voices other than the judge's blanked (module doc)."""
    if not _DIGIT.search(text):
        return text
    return _voice_names(_voice_clauses(_voice_lines(_voice_blocks(text))))


__all__ = ["mask_voices"]
