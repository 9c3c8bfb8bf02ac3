/* row_store: the columns a caller resolves once (bf_row_store_column) read
 * the same values as a read by name, for every row; a column the rows do
 * not have, or one asked for before the first row, is -1 and reads NULL;
 * a config whose seed was set aside reads back whole. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <jansson.h>

#include "row_store.h"

static void add(bf_row_store *s, json_int_t id, const char *status,
                json_int_t seed)
{
    json_t *row = json_pack("{s:I, s:s, s:I, s:s}", "job_id", id,
                            "status", status, "seed", seed, "config",
                            seed == 3 ? "{\"lr\": 0.1, \"seed\": 3}"
                                      : "{\"lr\": 0.1, \"seed\": 99}");
    bf_row_store_add(s, row);
    json_decref(row);
}

static void test_columns_resolved_once(void **state)
{
    (void)state;
    bf_row_store s = { 0 };
    assert_int_equal(bf_row_store_column(&s, "status"), -1);  /* no row yet */
    add(&s, 7, "succeeded", 3);
    add(&s, 8, "failed", 4);
    int id = bf_row_store_column(&s, "job_id"),
        status = bf_row_store_column(&s, "status"),
        config = bf_row_store_column(&s, "config");
    assert_true(id >= 0 && status >= 0 && config >= 0);
    assert_int_not_equal(id, status);
    for (size_t row = 0; row < 2; row++) {
        assert_ptr_equal(bf_row_store_at(&s, row, id),
                         bf_row_store_get(&s, row, "job_id"));
        assert_ptr_equal(bf_row_store_at(&s, row, status),
                         bf_row_store_get(&s, row, "status"));
    }
    assert_int_equal(json_integer_value(bf_row_store_at(&s, 1, id)), 8);
    assert_string_equal(json_string_value(bf_row_store_at(&s, 0, status)),
                        "succeeded");
    /* The first row's config shares its seed with the row: set aside, and
     * put back when read through bf_row_store_config. */
    assert_int_equal(json_integer_value(bf_row_store_config(&s, 0, "seed")), 3);
    assert_int_equal(json_integer_value(bf_row_store_config(&s, 1, "seed")), 99);
    /* No such column, a column past the last, a row past the last. */
    assert_int_equal(bf_row_store_column(&s, "error"), -1);
    assert_null(bf_row_store_at(&s, 0, -1));
    assert_null(bf_row_store_at(&s, 0, 4));
    assert_null(bf_row_store_at(&s, 2, id));
    bf_row_store_clear(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_columns_resolved_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
