"""Offline data modules: text corpora, pre-tokenised shards, and MQAR.

`trainers.data.build.build_datamodule(cfg, data_root)` builds the module of a trial's data kind.
This package face imports nothing: `trainers.config` reads the corpus names (`corpora`) below the
data modules, which import the config classes.
"""
