"""The blind judge-answer corpora (issue 30), replayed through ``capjudge score --json``.

The corpora were written by people who saw the prompts, the papers and the output contract,
never the reader's code (``tests/data/blind_corpus_brief.md``), and committed before the
reader was changed; no case is edited after measuring. Each answer goes through the
stand-in OpenAI-protocol server and the real CLI (``tests/replay.py``): its text or tokens,
its ``reasoning_content`` and ``finish_reason`` as an API returns them.

The bar: every case read as worked out by hand, and no wrong value ever returned as valid.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from replay import Outcome, judged, load, replay

DATA = Path(__file__).parent / "data"
CORPORA = ["blind_answers.json", "blind_answers_c.json", "holdout_answers.json"]
ENTRIES: list[tuple[str, dict[str, Any]]] = [
    (name, e) for name in CORPORA if (DATA / name).is_file() for e in load(DATA / name)]


def test_the_corpora_are_large_and_cover_every_method() -> None:
    blind = load(DATA / "blind_answers.json")
    assert len(blind) >= 100
    assert {e["method"] for e in blind} == {"gveval", "gveval-accr", "visce2", "harmoniceval",
                                            "cap3d"}
    assert len({e["id"] for _, e in ENTRIES}) == len(ENTRIES)


@pytest.mark.parametrize("entry", [e for _, e in ENTRIES], ids=[e["id"] for _, e in ENTRIES])
def test_every_blind_answer_reads_as_worked_out_by_hand(entry: dict[str, Any],
                                                       tmp_path: Path) -> None:
    outcome = judged(entry, replay(entry, tmp_path))
    assert not outcome.wrong_valid, (f"WRONG VALUE RETURNED AS VALID: {outcome}", entry["why"])
    assert outcome.right, (outcome, entry["why"])


def _present(name: str) -> list[dict[str, Any]]:
    """The corpus ``name`` in tests/data, or none when it is absent (its test then skips)."""
    return load(DATA / name) if (DATA / name).is_file() else []


def _outcomes(corpus: list[dict[str, Any]], tmp_path: Path, *, confirm: bool = False
              ) -> dict[str, Outcome]:
    """Each entry replayed in a folder of its own, by id."""
    outcomes = {}
    for e in corpus:
        work = tmp_path / e["id"]
        work.mkdir()
        outcomes[e["id"]] = judged(e, replay(e, work, confirm=confirm))
    return outcomes


# Corpus D (a fourth writer; first measured at 163/190 read right with 13 wrong values returned
# as valid, then the classes behind them fixed: decimal commas, hedges in other languages, a
# label's value taken from the next labelled line, two JSON score keys that disagree, an
# opening bare number against a later label, answers that rate other things by name, cap3d
# percentages). Its remaining misses are abstentions where the writer read a value (stars,
# counts in words or other languages for cap3d): safe, and listed by bench/bench_reader.py.
CORPUS_D = _present("blind_answers_d.json")


@pytest.mark.heavy(seconds=17)
def test_corpus_d_no_wrong_value_as_valid_and_read_right_but_for_abstentions(
        tmp_path: Path) -> None:
    if not CORPUS_D:
        pytest.skip("corpus D is not present")
    outcomes = _outcomes(CORPUS_D, tmp_path)
    wrong = [f"{k}: {o}" for k, o in outcomes.items() if o.wrong_valid]
    assert not wrong, "WRONG VALUES RETURNED AS VALID:\n" + "\n".join(wrong)
    right = sum(o.right for o in outcomes.values())
    assert right >= 184, right  # measured: 184/190 (rules 33), every miss an abstention


# Corpus E (issue 40: a fifth writer, after the contract and the second channel were designed,
# committed before it was measured; each case also carries the judge's reply to the follow-up
# question). Before the change: 76/129 read right, 20 wrong values returned as valid. Replayed
# with ``confirm: follow_up`` (an OpenAI-protocol server without logprobs): 99/129 with 2 wrong
# values returned as valid; then the two classes behind them fixed (a first number restated in
# the same sentence as another value on the scale, "8, that is, roughly 85 out of 100"; a
# verdict after sentences that evaluate only the references): 101/129, none. Then the safe
# misses' classes read (tool-call arguments as a JSON string, CSV tables, worked arithmetic and
# arrows, abbreviated labels, a pointed-at rubric level, star rows, cap3d's paraphrased labels
# and zero in words): 118/129, none; with numbers spelled out in five other languages:
# 121/129.
CORPUS_E = _present("blind_answers_e.json")
KNOWN_WRONG_E: set[str] = set()


# Corpus F (issue 40: a sixth writer, blind to the reader and to corpus E, held out: committed
# before it was measured). First measurement with ``confirm: follow_up``: 116/145 read right, 8
# wrong values returned as valid (the reader before issue 40: 98/145, 21); the classes behind
# them fixed (struck-through text, a correction saying "should be", a paragraph scoring an
# improved caption, image clarity, an opening rating against a level named later, a ticked
# line's digit): 123/145, 1 left (VisCE²'s literal reading of "Rating: 9" on 0-100, which the
# follow-up repeats); then a bottom-tenth rating beside praise alone abstains, and the classes
# above: 137/145, none; 139/145 with numbers spelled out in other languages.
CORPUS_F = _present("blind_answers_f.json")
KNOWN_WRONG_F: set[str] = set()


# Corpus G (issue 40: a seventh writer, blind to the reader and to corpora A-F, asked for kinds
# none of them has; committed before it was measured). The reader before this session's
# changes: 145/163 read right, 5 wrong values returned as valid; first measured after the
# changes made for E and F: 144/163, 5 (the new arrow reading took a denominator, "7 out of
# 10 -> 70/100", for a computation). The classes behind them fixed (a table's "Score" header
# over rows scoring other things, another criterion's label, a trailing "+", a bottom-tenth
# rating beside praise alone, cap3d's "3/4"): 150/163, none; 151/163 with numbers spelled
# out in other languages; then its safe misses' classes ("$+69$", "$≈74$", "$85/100$", a list
# of JSON objects each naming its criterion, "Coverage" for completeness, cap3d labels as
# headings): 157/163.
CORPUS_G = _present("blind_answers_g.json")
KNOWN_WRONG_G: set[str] = set()


# Corpus H (issue 40: an eighth writer, blind to the reader and to corpora A-G, asked for kinds
# none of them has; committed before it was measured). First measured with the reader of
# rules 7: 129/147 read right, 7 wrong values returned as valid (the same after cap3d's counts
# moved into the seam). The classes behind them fixed (a verdict under an unsettled condition,
# an alternative left open after a comma, "$7$$5$", a difference from another score, a rubric's
# bottom level beside praise alone, cap3d counts taken back with none given): 136/147, none;
# then its safe misses' classes (a quoted fragment of the candidate, HTML character
# references, a value the answer resolves onto the scale: "7 out of 10, i.e. 70"): 142/147;
# a block headed final after one headed draft: 143/147.
CORPUS_H = _present("blind_answers_h.json")
KNOWN_WRONG_H: set[str] = set()


# Corpus I (issue 40: a ninth writer, blind to the reader and to corpora A-H, asked for kinds
# none of them has; committed before it was measured). First measured with rules 8 and the
# draft/final blocks: 127/140 read right, 3 wrong values returned as valid (the reader of rules
# 7: 128, 3). The classes behind them fixed (a verdict corrected by an amount with no new value,
# a summary line that disagrees with the verdict, cap3d counts whose breakdown names the other
# kind), and a negative H count on the prompt's own line is on-contract: 131/140, none; then
# its safe misses' classes (gpt-oss's harmony channels, MT-Bench's [[N]], Prometheus'
# [RESULT] N): 135/140.
CORPUS_I = _present("blind_answers_i.json")
KNOWN_WRONG_I: set[str] = set()


# Corpus J (issue 40: a tenth writer, blind to the reader and to corpora A-I; committed before
# it was measured). First measured with rules 8 and the checks of what follows a verdict
# (capjudge.reading.settled): 127/141 read right, 4 wrong values returned as valid (rules 8
# alone: 126, 5). The classes behind them fixed (a choice left to the reader, "Overall" for a
# criterion, a bottom rating beside small faults only, a cap3d count with an alternative in its
# aside), with four safe misses' ("4,0", "I would score it 91", a hypothetical aside, the
# caption's own count): 135/141, none.
CORPUS_J = _present("blind_answers_j.json")
KNOWN_WRONG_J: set[str] = set()


# Corpus K (issue 40: an eleventh writer, blind to the reader and to corpora A-J; committed
# before it was measured). First measured with rules 9: 147/162 read right, 7 wrong values
# returned as valid. The classes behind them fixed (rules 10: two values for the one verdict,
# another scale the answer names, a total line, an example of the format, a span of rubric
# levels): 154/162, none.
CORPUS_K = _present("blind_answers_k.json")
KNOWN_WRONG_K: set[str] = set()


# Corpus L (issue 40: a twelfth writer, blind to the reader and to corpora A-K; committed
# before it was measured). First measured with rules 11: 111/136 read right, 7 wrong values
# returned as valid. The classes behind six fixed (rules 12: a value asked as a question, a
# rank, indifference between values, the judge doubting its own value, "scale 1-5",
# "eighty-ish", a later rating phrase after a revision cue): 117/136. The seventh is known
# and listed: a bare "8" whose reasoning (never read as the answer) says it means 80.
CORPUS_L = _present("blind_answers_l.json")
KNOWN_WRONG_L = {"L-vis-single-digit"}


# Corpus M (issue 40: a thirteenth writer, blind to the reader and to corpora A-L; committed
# before it was measured). First measured with rules 12: 125/138 read right, 6 wrong values
# returned as valid. The classes behind them fixed (rules 13: steps that do not give the stated
# result, a band of ten that leaves the verdict out, a bottom rating beside praise and small
# faults only, a bare number for a numeric candidate, a cap3d count the prose states
# otherwise), with three safe misses' (LaTeX spacing and display blocks, "C. Score (3)"):
# 134/138, none.
CORPUS_M = _present("blind_answers_m.json")
KNOWN_WRONG_M: set[str] = set()


# Corpus N (issue 40: a fourteenth writer, blind to the reader and to corpora A-M; committed
# before it was measured). First measured with rules 13: 121/134 read right, 2 wrong values
# returned as valid (a 0 the judge calls a placeholder after it could not load the image, a
# count of dogs as VisCE²'s first number). With those classes (rules 14): 123/134, none.
CORPUS_N = _present("blind_answers_n.json")
KNOWN_WRONG_N: set[str] = set()


# Corpus O (issue 40: a fifteenth writer, blind to the reader and to corpora A-N; committed
# before it was measured). First measured with rules 14: 113/124 read right, 2 wrong values
# returned as valid (a "length-adjusted score" after the verdict read as its revision, a
# "Preliminary score" with no final one). With those classes (rules 15): 115/124, none.
CORPUS_O = _present("blind_answers_o.json")
KNOWN_WRONG_O: set[str] = set()


# Corpus P (issue 40: a sixteenth writer, blind to the reader and to corpora A-O; committed
# before it was measured). First measured with rules 15: 128/145 read right, 4 wrong values
# returned as valid. Three classes fixed (rules 16: numbers alone, a quoted caption that is
# none of the request's, a caption of the judge's own before its verdict): 131/145. The
# fourth is listed: cap3d's "C. Score: 1/2" beside "gets half credit" and a precision of 33 %,
# read 0.5, where the writer saw "1 of 2" competing (a reading this reader keeps: the prompt
# gives 0.5 for partial credit and the answer says half).
CORPUS_P = _present("blind_answers_p.json")
KNOWN_WRONG_P = {"P-c3-half-fraction"}


# Corpus Q (issue 40: a seventeenth writer, blind to the reader and to corpora A-P, asked for
# kinds none of them has; committed before it was measured, after the reading entry point).
# First measured with rules 16: 130/150 read right, 6 wrong values returned as valid (a value
# and another under qualifiers, a later value the judge prefers, a verdict restated on its own
# scale, cap3d: the other label's value on the same line, a count hedged in the final review,
# penalty points beside H). With those classes (rules 17): 136/150, none; 137 with rules 18.
CORPUS_Q = _present("blind_answers_q.json")
KNOWN_WRONG_Q: set[str] = set()


# Corpus R (issue 40: an eighteenth writer, blind to the reader and to corpora A-Q, every kind
# new by name; committed before it was measured). First measured with rules 17: 127/156 read
# right, 2 wrong values returned as valid (a verdict on a severity scale the judge turned
# round, a full-width digit among the alternatives whose probability was dropped). With those
# classes and three safe misses' (a marked value on a printed scale, a label that measures the
# verdict's confidence, cap3d's initials in brackets after another language's name; rules
# 18): 134/156, none. Rules 19 (from R on the llama.cpp server's forced anchor, where the base
# model "confirmed" three wrong values: a score field after the verdict with another value,
# "1" beside "appropriate", Tamil's "100-க்கு 68"): 135/156.
CORPUS_R = _present("blind_answers_r.json")
KNOWN_WRONG_R: set[str] = set()


# Corpora S and T (issue 40: two writers, blind to the reader and to corpora A-R, asked for
# kinds none of them has; S the long tail of ordinary judges and serving stacks, T the methods
# other than plain G-VEval; both committed before they were measured). First measured with
# rules 19: S 123/138 read right and 3 wrong values returned as valid ("I'd say 70. Or 75.",
# "4 / Actually, 3 or 4", cap3d's "3 → 4?"); T 117/138 and 2 (cap3d: H corrected in prose
# after the lines, "1 point each ... = 2" read at the rate). With those classes and the safe
# misses' (markup inside the delimiters, criterion names in more languages, a rubric with one
# level in bold, HTML, an explanation's bullet naming a label; rules 20): S 132, T 126, none.
# On the llama.cpp server T's first measurement had 3 wrong values the base model "confirmed"
# (a rating recalled from an earlier image, "Rating: 75 (draft)" in a cut answer, lines shown
# as an example of the output): classes read in rules 20 too.
CORPUS_S = _present("blind_answers_s.json")
KNOWN_WRONG_S: set[str] = set()
CORPUS_T = _present("blind_answers_t.json")
KNOWN_WRONG_T: set[str] = set()


# Corpus U (issue 40: a writer blind to the reader and to corpora A-T, asked for a held-out set:
# a third ordinary answers, two thirds new kinds; committed before it was measured). First
# measured with rules 20: 120/135 read right and 2 wrong values returned as valid (a verdict
# resting on a frame order the judge doubts, with another value for the other order; VisCE²'s
# rating restated as the prompt's "single digit"). With those classes and four safe misses'
# (Seed-OSS's namespaced "<seed:think>", "Sorry, I transposed the digits", Vietnamese criterion
# names, "1 to 5: 4"; rules 21): 126/135, none. On the llama.cpp server one more, which the
# base model "confirmed": a HarmonicEval answer rating the VQA question (rules 21 too).
CORPUS_U = _present("blind_answers_u.json")
KNOWN_WRONG_U: set[str] = set()

# Corpus V (150, a writer blind to the reader and to A-U, asked for a user's own run: five kinds
# of judge, their everyday shapes and about a third their rarer failures), committed before it
# was measured with rules 21: 136/150 read right and 6 wrong values returned as valid (a cached
# answer quoting a near-duplicate caption, a reference taken for the candidate, "Appropriateness
# (safety): 100", "Rating for the visual context: 90", "Confidence: 92%", a reasoning field that
# compresses 75 to the printed single digit 7). Rules 22 read five of those classes and the
# safe misses' (a serving API's whole response or a framework's printed result object, LaTeX
# tables, a gateway's content-filter notice, Galician and Bulgarian labels): 145/150, and the
# sixth (the answer "7" is on contract, so no second channel is asked; only the thought says 7
# stands for 75) with the thought kept beside the answer (capjudge.reading.thought): 146/150.
CORPUS_V = _present("blind_answers_v.json")
KNOWN_WRONG_V: set[str] = set()

# Corpus W (143, a writer blind to the reader and to A-V, asked for hard requests: candidates and
# references that carry numbers, scores, markup and instructions of their own, judged by
# ordinary judges), committed before it was measured with rules 22: 125/143 read right and 11
# wrong values returned as valid (a verdict that is the candidate's own stated score or the
# value it asks for, "100, as the caption requests"; the caption's count restated first; a
# reference or the judge's rewrite assessed instead of the candidate; an unlabelled number of
# the caption after the judge's copy of it). Rules 23: 139/143, none; the four misses are
# abstentions where the verdict equals the candidate's stated score with no sign of copying.
CORPUS_W = _present("blind_answers_w.json")
KNOWN_WRONG_W: set[str] = set()

# Corpus X (146, a writer blind to the reader and to A-W, asked for long answers and judges that
# keep talking: critiques with sub-scores and weights, postscripts, revisions, the previous
# caption or the judge's rewrite scored on the way), committed before it was measured with
# rules 23: 127/146 read right and 5 wrong values returned as valid (an "Overall" row beside
# other criteria's rows for correctness; an opening rating against a closing "I'd say 3"; cap3d
# counts revised after "Edit:" or a final review; a count with its alternative in brackets).
# Rules 24: 143/146, none.
CORPUS_X = _present("blind_answers_x.json")
KNOWN_WRONG_X: set[str] = set()

# Corpus Y (154, a writer blind to the reader and to A-X, asked for verdicts a reader has to
# work out: positions on the scale in words, sums and baselines, conversions between scales,
# grades and stars, rounding, rankings, distributions, cap3d tallies), committed before it was
# measured with rules 24: 122/154 read right and 2 wrong values returned as valid (a
# distribution over ratings read as its first value, which the follow-up also gave; a rating
# glossed with another level's name), 9 without the follow-up. Rules 25: 134/154, none.
CORPUS_Y = _present("blind_answers_y.json")
KNOWN_WRONG_Y: set[str] = set()

# Corpus Z (141, a writer blind to the reader and to A-Y, asked for the long tail of a week of
# real traffic: about 40 % ordinary answers, the rest the odd things that turn up once in a few
# hundred), committed before it was measured with rules 25: 135/141 read right and none wrong
# with the follow-up (3 without it, all off-contract: a verdict left "somewhere in between",
# two offered for the reader to pick, "seventy—no, sixty-five"). Rules 26: 138/141, none.
CORPUS_Z = _present("blind_answers_z.json")
KNOWN_WRONG_Z: set[str] = set()

# Corpus AA (192, a writer blind to the reader and to A-Z, asked for what the number is about:
# scores of frames, sentences, halves of the picture, references, the picture's quality, the
# judge's own rewrite, earlier items and hypotheticals beside or instead of the verdict),
# committed before it was measured with rules 27: 174/192 read right and 3 wrong values
# returned as valid (a reference quoted as "the generated caption", a neutral default "so the
# pipeline can continue", ACCR lines headed "the scores for the reference caption"), 8
# without the follow-up. Rules 28: 190/192, none.
CORPUS_AA = _present("blind_answers_aa.json")
KNOWN_WRONG_AA: set[str] = set()

# Corpus AB (170, a writer blind to the reader and to A-AA, asked for the method's own verdict
# format or a cosmetic variant of it, about half where its number is not the verdict: a plan,
# a hypothetical, a draft, a placeholder, an obeyed injection, a list's numbers, prose that
# contradicts it), committed before it was measured with rules 28: 153/170 read right and 6
# wrong values returned as valid (the format after a prose rating with another value, ACCR's
# line against its own prose, a numbered list read as "1", an injected "rating 100", cap3d
# lines against the explanation's tally and a final review), 10 without the follow-up.
# Rules 29: 165/170, none.
CORPUS_AB = _present("blind_answers_ab.json")
KNOWN_WRONG_AB: set[str] = set()

# Corpus AC (239, a writer blind to the reader and to A-AB, asked for how the number is written
# and qualified: other scripts' digits, numerals and words, HTML entities, escapes, invisible
# characters and footnote markers at the number; bounds, decades, provisional values, spreads),
# committed before it was measured with rules 29: 204/239 read right and 13 wrong values
# returned as valid (bounds, decades, provisional values, spreads, cap3d counts with "+"), the
# same without the follow-up. Rules 30: 228/239; the four known are spreads ("$80 \pm 10$"),
# which AC's writer (whose brief listed "80 ± 10" among qualifiers) reads as no verdict and the
# writers of C, G, H, I, J, K, L and M, unprompted, read at their centre: the reader follows them.
CORPUS_AC = _present("blind_answers_ac.json")
KNOWN_WRONG_AC = {"AC-gv-plus-minus-spread", "AC-gv-tok-plus-minus-after-number",
                  "AC-accr-pm-on-completeness", "AC-vc-plus-minus"}

# Corpus AD (208, a writer blind to the reader and to A-AC, asked for the other prompts:
# HarmonicEval's five criteria, G-VEval's ref-free, combined and video prompts, ACCR in those
# modes, VisCE² with its visual context, cap3d's views), committed before it was measured with
# rules 30: 200/208 read right and 2 wrong values returned as valid (a score for one frame of
# the video, a score of the visual context), 199 and 3 without the follow-up.
CORPUS_AD = _present("blind_answers_ad.json")
KNOWN_WRONG_AD: set[str] = set()

# Corpus AE (227, a writer blind to the reader and to A-AD, asked for one realistic day across
# every prompt from twelve named judges, two thirds their ordinary answers), committed before
# it was measured with rules 31: 225/227, 1 wrong value returned as valid, the same without the
# follow-up. The one is a ruling: "4 ... However, looking more closely ... **Final rating: 3**",
# which AE's writer reads as two verdicts and the writers of D ("Revised score: 4") and AB ("my
# final answer is 3"), unprompted, read at the labelled final; the reader follows them, off
# the contract, and the judge's own follow-up says 3.
CORPUS_AE = _present("blind_answers_ae.json")
KNOWN_WRONG_AE = {"AE-q3t-he-two-verdicts"}

# Corpus AF (231, a writer blind to the reader and to A-AE, asked for judges trained to judge,
# each in its trained format: Prometheus, LLaVA-Critic, UnifiedReward, JudgeLM, Auto-J,
# PandaLM, TIGERScore, CLAIR, FLEUR, G-Eval, VisionReward, Q-Align, reward heads), committed
# before it was measured with rules 31: 221/231 and 8 wrong values returned as valid (a 1-5
# habit on 0-100: "[RESULT] 3", "<score>4</score>", a PandaLM preference "2", G-Eval's
# "- Coherence: 4" for clarity and "Fluency (1-3): 3"), 216 and 14 without the follow-up: the
# follow-up cannot help where the judge repeats its trained number.
CORPUS_AF = _present("blind_answers_af.json")
KNOWN_WRONG_AF: set[str] = set()

# Corpus AG (229, a writer blind to the reader and to A-AF, asked for number-dense pictures:
# charts, receipts, scoreboards, gauges, clocks, exam papers, app ratings, 3D objects with
# numeric attributes, where the critique is full of numbers that are not the verdict),
# committed before it was measured with rules 32: 221/229 and none wrong with the follow-up;
# 219 and 2 without it (a match clock's "87:12", a caption's "14:35" read as VisCE²'s first
# number). Rules 33: 229/229, none, both ways.
CORPUS_AG = _present("blind_answers_ag.json")
KNOWN_WRONG_AG: set[str] = set()

# Corpus AH (264, a writer blind to the reader and to A-AG, asked for how people talk around a
# number: litotes, rhetorical questions, sarcasm, slang and emoji, softening, counterfactuals,
# idioms in other languages, figurative numbers), committed before it was measured with rules
# 33: 222/264 and 6 wrong values returned as valid with the follow-up ("anything but $100$",
# sarcasm, "better than a 3, not quite a 4", "a high five", a cap3d count under a condition,
# stars), 218 and 19 without it. Rules 34: 234/264, one known: "⭐⭐⭐☆☆" alone on 1-5, which
# AH's writer reads as no number and the writers of AC, D, E and F, unprompted, read as 3 or 4.
CORPUS_AH = _present("blind_answers_ah.json")
KNOWN_WRONG_AH = {"AH-he-cor-stars-only"}

# Corpus AI (252, a writer blind to the reader and to A-AH, asked for many voices in one answer:
# self-consistency samples, panels and personas, debates, agent logs, other judges quoted,
# rounds, votes), committed before it was measured with rules 34: 201/252 and 4 wrong values
# returned as valid with the follow-up (another evaluator's 5, a cut "Reviewer 1: 4 /
# Reviewer 2:", GPT-4's quoted cap3d lines, an annotator's value read for the consensus's
# distribution). Rules 35: 233/252, none; rules 36: 234 (a "# Agent: Crew Manager" block).
CORPUS_AI = _present("blind_answers_ai.json")
KNOWN_WRONG_AI: set[str] = set()

# Corpus AJ (236, a writer blind to the reader and to A-AI, asked for what decoders and serving
# paths do to an answer: sampling typos, repetition penalties, n > 1 choices joined, guided
# decoding, ignore_eos and stop sequences, detokenisation artefacts, echo and raw base models),
# committed before it was measured with rules 35: 209/236 and 13 wrong values returned as valid
# with the follow-up (split digits, a JSON key written twice, a schema's template echoed, a
# bare "Score: 90" before "$91$", the same caption rated again, a second turn of the judge's
# own, cap3d counts against their own tally or precision). Rules 36: 230/236. Two are known,
# each a ruling: "Score: 4/5" before "The final score is $75$", which AJ's writer reads as two
# verdicts and the reader, as for "Accuracy: $85$ (4/5)", as a coarse rounding of the one on
# 0-100; and "5. Actually ... I'd say 2." under a forced first token, which AJ's writer reads as
# open and the reader, like the writers of D and X ("Edit:", "On reflection"), as a revision,
# off the contract, which the judge's own follow-up confirms.
CORPUS_AJ = _present("blind_answers_aj.json")
KNOWN_WRONG_AJ = {"AJ-gv-lora-five-point-conflicts", "AJ-he-con-forced-first-token"}

# Corpus AK (237, a writer blind to the reader and to A-AJ, asked for a deployment that imposes
# its own style or genre: personas, memos with a summary line, tweets, verse, code, SQL,
# receipts, report cards, schema.org JSON-LD, "never print numerals"), committed before it was
# measured with rules 36: 199/237 and 4 wrong values returned as valid with the follow-up (a
# memo's "Summary: ..., 85/100" and a TL;DR beside another verdict, a limerick's committed
# rating beside the label line), 197 and 11 without it. Rules 37: 213/237, none.
CORPUS_AK = _present("blind_answers_ak.json")
KNOWN_WRONG_AK: set[str] = set()

# Corpus AL (228, a writer blind to the reader and to A-AK, asked for a judge whose context holds
# other items: long chat sessions, agent memory, few-shot calibration examples with gold scores,
# reused conversations, several candidates in one request), committed before it was measured
# with rules 37: 164/228 and 20 wrong values returned as valid with the follow-up (a verdict
# the answer says is another item's, a verdict on another item's quoted caption, a copied
# few-shot example, a best-of-N pick, a cached verdict before an end-of-turn token). Rules 38:
# 198/228. Two are known and not read right: a memory tool's call that stores a score for "item
# 7" as the whole answer (read as the verdict, which the judge's follow-up repeats), and an
# answer that quotes a shorter earlier text ("A bear in a river.") whose words are all the
# candidate's, so the reader takes it for the candidate.
CORPUS_AL = _present("blind_answers_al.json")
KNOWN_WRONG_AL = {"AL-gv-memory-save-only", "AL-he-con-answers-previous-text"}


# (corpus, wrong values known and listed, read right at least).
CONFIRMED = [("E", CORPUS_E, KNOWN_WRONG_E, 122), ("F", CORPUS_F, KNOWN_WRONG_F, 139),
             ("G", CORPUS_G, KNOWN_WRONG_G, 157), ("H", CORPUS_H, KNOWN_WRONG_H, 145),
             ("I", CORPUS_I, KNOWN_WRONG_I, 138), ("J", CORPUS_J, KNOWN_WRONG_J, 136),
             ("K", CORPUS_K, KNOWN_WRONG_K, 155), ("L", CORPUS_L, KNOWN_WRONG_L, 121),
             ("M", CORPUS_M, KNOWN_WRONG_M, 135), ("N", CORPUS_N, KNOWN_WRONG_N, 127),
             ("O", CORPUS_O, KNOWN_WRONG_O, 119), ("P", CORPUS_P, KNOWN_WRONG_P, 135),
             ("Q", CORPUS_Q, KNOWN_WRONG_Q, 143), ("R", CORPUS_R, KNOWN_WRONG_R, 138),
             ("S", CORPUS_S, KNOWN_WRONG_S, 133), ("T", CORPUS_T, KNOWN_WRONG_T, 128),
             ("U", CORPUS_U, KNOWN_WRONG_U, 129), ("V", CORPUS_V, KNOWN_WRONG_V, 147),
             ("W", CORPUS_W, KNOWN_WRONG_W, 139), ("X", CORPUS_X, KNOWN_WRONG_X, 145),
             ("Y", CORPUS_Y, KNOWN_WRONG_Y, 134),
             ("Z", CORPUS_Z, KNOWN_WRONG_Z, 138), ("AA", CORPUS_AA, KNOWN_WRONG_AA, 190),
             ("AB", CORPUS_AB, KNOWN_WRONG_AB, 166), ("AC", CORPUS_AC, KNOWN_WRONG_AC, 230),
             ("AD", CORPUS_AD, KNOWN_WRONG_AD, 208), ("AE", CORPUS_AE, KNOWN_WRONG_AE, 226),
             ("AF", CORPUS_AF, KNOWN_WRONG_AF, 230), ("AG", CORPUS_AG, KNOWN_WRONG_AG, 229),
             ("AH", CORPUS_AH, KNOWN_WRONG_AH, 236), ("AI", CORPUS_AI, KNOWN_WRONG_AI, 234),
             ("AJ", CORPUS_AJ, KNOWN_WRONG_AJ, 230), ("AK", CORPUS_AK, KNOWN_WRONG_AK, 213),
             ("AL", CORPUS_AL, KNOWN_WRONG_AL, 198)]


@pytest.mark.heavy(seconds=15)
@pytest.mark.parametrize(("name", "corpus", "known_wrong", "at_least"), CONFIRMED,
                         ids=[c[0] for c in CONFIRMED])
def test_corpus_with_confirmation(name: str, corpus: list[dict[str, Any]], known_wrong: set[str],
                                  at_least: int, tmp_path: Path) -> None:
    if not corpus:
        pytest.skip(f"corpus {name} is not present")
    outcomes = _outcomes(corpus, tmp_path, confirm=True)
    wrong = {k for k, o in outcomes.items() if o.wrong_valid}
    assert wrong <= known_wrong, "NEW WRONG VALUES RETURNED AS VALID: " + ", ".join(
        sorted(wrong - known_wrong))
    right = sum(o.right for o in outcomes.values())
    assert right >= at_least, right
