"""Reviewing agent code by counterexample: `strictcall check` and `strictcall lint`."""
