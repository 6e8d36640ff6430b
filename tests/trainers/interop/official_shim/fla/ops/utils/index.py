def prepare_lens_from_mask(mask):
    return mask.sum(-1, dtype=mask.new_tensor(0).int().dtype)
