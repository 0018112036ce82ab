"""Model architectures: presets from published configs and import of a local Hugging Face config.json."""
