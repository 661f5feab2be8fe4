"""A tiny capjudge plugin: components added through entry points, not by editing capjudge."""
