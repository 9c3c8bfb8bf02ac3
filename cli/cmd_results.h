/* cmd_results: `bifocal results SWEEP [--format table|csv|json]`,
 * `bifocal compare SWEEP [--by FIELD,...] [--baseline FIELD=VALUE]
 * [--format table|csv|json]` and `bifocal report SWEEP [-o FILE.html]
 * [--json] [--baseline F=V] [--by FIELD,...]`, each with [--where
 * FIELD=VALUE[,...]] and [--db FILE] (docs/results.md): the arguments of
 * the command line, over what results/ prints (results.c, compare.c) and
 * writes (report.c).  Each is a bf_client_command (client.h). */
#ifndef BF_CMD_RESULTS_H
#define BF_CMD_RESULTS_H

#include "session.h"

int bf_client_cmd_results(bf_client *cl, int argc, char **argv);
int bf_client_cmd_compare(bf_client *cl, int argc, char **argv);
int bf_client_cmd_report(bf_client *cl, int argc, char **argv);

#endif
