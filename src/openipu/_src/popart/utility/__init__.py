"""PopART's utility classes (spec 13.8 and 13.10): debug contexts, operator identity, the
framework-writer base class."""
