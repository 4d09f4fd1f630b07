"""Side modules for text-mining evaluation: Meta-Eval (metadata P/R), BRAT/ChEMU scoring and a
resumable results cache for phenotype-driven disease ranking."""
