"""Distillation: a judged run becomes memories, one distiller per registered format, with quality and leak gates."""
