"""Graph generation from public biomedical sources (see ../shared/DESIGN.md); built in a later issue."""
