"""The two files an export folder's config.json names in `auto_map`; copied as they are
(trainers.interop.export), never imported from here: they import the vendored `arch` relatively."""
