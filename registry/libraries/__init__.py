"""Shared libraries: a tenant offers what one of its labels serves; another accepts (issue 71)."""
