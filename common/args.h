/* args: the number parsing every command line of Bifocal shares, so that
 * "4294967297", "3x" or "" are refused the same way everywhere instead of
 * wrapping or being read as a prefix. */
#ifndef BF_ARGS_H
#define BF_ARGS_H

/* Parses all of s as a decimal integer in [min, max] into *out.
 * Returns 0, or -1 (leaving *out alone) on anything else. */
int bf_parse_int_arg(const char *s, long min, long max, int *out);

#endif
