/* libFuzzer: the records reader of `bifocal-worker --exec`
 * (common/records.c, bf_record_from_line), which takes whatever line a
 * user's trainer appends.  Every record it accepts must write back
 * (bf_record_to_json) as a line it reads again to the same text: the
 * worker sends on what it read, so a record that reads but does not
 * write, or writes what it would refuse, is a bug. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "records.h"

static char *written(const bf_record *r)
{
    json_t *j = bf_record_to_json(r);
    if (!j)
        abort();
    char *text = json_dumps(j, BF_RECORD_DUMP_FLAGS);
    json_decref(j);
    if (!text)
        abort();
    return text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bf_record_read first, again;
    bf_error err;
    if (bf_record_from_line((const char *)data, size, &first, &err) != 0) {
        bf_record_read_clear(&first);
        return 0;
    }
    char *text = written(&first.r);
    if (bf_record_from_line(text, strlen(text), &again, &err) != 0)
        abort();
    char *text2 = written(&again.r);
    if (strcmp(text, text2) != 0)
        abort();
    free(text);
    free(text2);
    bf_record_read_clear(&first);
    bf_record_read_clear(&again);
    return 0;
}
