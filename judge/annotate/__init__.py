"""`judge annotate`: people label a run's rows in a local web page, one row at a time,
each label appended to a labels file at once; the labels feed `judge agreement` and
`judge estimate`, and several people's labels give their agreement (Cohen's or Fleiss'
kappa)."""

from judge.annotate.session import Annotation, Choice

__all__ = ["Annotation", "Choice"]
