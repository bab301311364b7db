"""Reports on runs and their logs: plots, tables, the collapse regression and the reward audit."""
