from transformers import GenerationMixin


class Cache:
    """Never built: the tests run without use_cache."""

    @classmethod
    def from_legacy_cache(cls, *args, **kwargs):
        raise NotImplementedError("the CPU shim runs without use_cache")


class FLAGenerationMixin(GenerationMixin):
    pass
