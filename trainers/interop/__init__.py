"""Models in and out in the Hugging Face format: export a trial to a transformers folder
(`trainers.export`), import the official SATFormer code's models (`trainers.convert`).

docs/interop.md says what travels, what does not, and why the export carries `arch` itself."""
