"""capjudge: evaluate captions with vision-language-model judges, and judges against humans."""

__version__ = "0.1.0"
