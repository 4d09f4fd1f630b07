"""The drug-repurposing task's tests, split as the task is: the matrix's counts, the ground-truth
files, the views and the record with its board, report and processes."""
