"""The command line: a thin Typer app; one module per verb; one place turns errors into messages."""
