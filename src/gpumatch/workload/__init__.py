"""Workload profiles (TOML/YAML): what is run, on what scale, with which targets and budgets."""
