"""fla's TransformerConfig: the official repository's own copy (models/transformer)."""

from models.transformer.configuration_transformer import TransformerConfig  # noqa: F401
