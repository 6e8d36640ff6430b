from torch import nn

GradientCheckpointingLayer = nn.Module
