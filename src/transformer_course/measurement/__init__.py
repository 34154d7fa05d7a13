"""Measuring cost rather than quality: Table 1 of the Transformer paper on real layers (``complexity``)
and training speed against ``torch.nn.Transformer`` (``speed``)."""
