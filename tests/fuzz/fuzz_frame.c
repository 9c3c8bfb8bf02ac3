/* libFuzzer: the frame reader and message parser every connection runs
 * (common/wire.c).  The input is fed in chunks whose sizes come from the
 * input itself; every complete line is parsed, every parsed message
 * re-encoded, as the daemon and the worker do with what a peer sends. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    bf_frame_reader r;
    /* A small limit now and then, as before a hello. */
    bf_frame_reader_init(&r, data[0] & 1 ? 256 : 0);
    size_t chunk = (size_t)(data[0] >> 1) + 1, at = 1;
    while (at < size) {
        size_t n = size - at < chunk ? size - at : chunk;
        if (bf_frame_reader_feed(&r, (const char *)data + at, n) != 0)
            abort();
        at += n;
        const char *line;
        size_t len;
        int got;
        while ((got = bf_frame_reader_next(&r, &line, &len)) == 1) {
            bf_error err;
            json_t *msg = bf_wire_parse(line, len, &err);
            if (!msg)
                continue;
            if (!bf_wire_type(msg))
                abort();
            char *frame = bf_wire_encode(msg, NULL);
            free(frame);
            json_decref(msg);
        }
        if (got < 0)
            break;   /* oversized: the connection would be closed */
    }
    bf_frame_reader_free(&r);
    return 0;
}
