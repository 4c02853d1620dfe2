"""The evaluation suite (`mlmkit eval suite`) and comparisons with intervals (`eval compare`)."""
