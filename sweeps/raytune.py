"""Backend ray (placeholder while being written)."""


def connect(study):
    raise NotImplementedError


def run(study, plan, driver, n, fit):
    raise NotImplementedError
