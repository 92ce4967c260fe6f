/* empty.c — keeps a library that is still being built up from having no sources. */
typedef int pk_empty_translation_unit;
