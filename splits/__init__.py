"""Leakage-free random and time-slice splits (see ../shared/DESIGN.md); built in a later issue."""
