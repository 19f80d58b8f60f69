"""Procedural world with ground truth: scenes, multilingual captions, small trained models."""
