"""One module per public source: where it lives, and a parser into polars DataFrames."""
