def l2_warp(loss, logits, *args, **kwargs):
    return loss
