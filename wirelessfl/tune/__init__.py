"""Hyper-parameter search per algorithm on the validation split (``wirelessfl tune``)."""
