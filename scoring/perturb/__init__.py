"""Caption perturbations as pure, seeded functions: the five PR-MCS operations, UMIC
negatives and SPECS detail units, with the tokenisation and POS tagging they rest on."""
