"""draftbench: which draft model (and which speculative-decoding settings) makes your big model fastest."""

__version__ = "0.1.0"
