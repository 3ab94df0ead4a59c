"""Whole-sweep simulation with known truth (see ``benchmarks/verdicts.py``): a simulated machine
behind the backend contract, so the sweep's own code measures it."""
