"""Agreement with humans, robustness, specificity and multilingual retrieval, as pure functions over score tables."""
