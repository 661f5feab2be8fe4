r"""Reading a judge's verdict from its answer, as a careful person does.

- :mod:`capjudge.reading.view`: the answer in canonical form (NFKC, invisible characters
  removed, reasoning blocks dropped), with a map back to the original offsets.
- :mod:`capjudge.reading.masking`: what a reader skips (quotations, restated rubrics,
  hypotheticals, rejected alternatives) and declines.
- :mod:`capjudge.reading.numbers`: numbers in digits, English words and CJK numerals.
- :mod:`capjudge.reading.structure`: JSON, tables and ``\boxed{}`` with their offsets.
- :mod:`capjudge.reading.vocabulary`: the names of a verdict in other languages.
- :mod:`capjudge.reading.locate`: the order in which a verdict is looked for, and when the
  reader abstains.

The log-probability side (the digit tree at the located number) is
:mod:`capjudge.backends.logprobs`.
"""
