/* cmd_dashboard: `bifocal dashboard`'s arguments, then the dashboard's
 * server.  See cmd_dashboard.h. */
#include "cmd_dashboard.h"

#include <stdio.h>

#include "command.h"
#include "dashboard.h"
#include "log.h"

static int parse_dashboard_args(int argc, char **argv, bf_dashboard_opts *o)
{
    const char *log_level = NULL;
    *o = (bf_dashboard_opts){ .db = "./bifocal.db",
                              .listen = BF_DASHBOARD_DEFAULT_LISTEN,
                              .session_ttl_s = BF_DASH_SESSION_TTL_S };
    const bf_option options[] = {
        BF_OPT_STR("db", "FILE", &o->db),
        BF_OPT_STR("listen", "HOST:PORT", &o->listen),
        BF_OPT_STR("token-file", "FILE", &o->token_file),
        BF_OPT_STR("port-file", "FILE", &o->port_file),
        BF_OPT_STR("log-level", "LEVEL", &log_level),
        BF_OPT_INT("session-ttl", "SECONDS", &o->session_ttl_s, 1,
                   BF_DASH_MAX_SESSION_TTL_S),
        BF_OPT_END,
    };
    if (bf_command_args(options, NULL, 0, argc, argv) < 0)
        return -1;
    int level = log_level ? bf_log_level_from_name(log_level) : BF_LOG_INFO;
    if (level < 0) {
        fprintf(stderr, "bifocal dashboard: --log-level is debug, info, warn "
                        "or error\n");
        return -1;
    }
    bf_log_set_level((bf_log_level)level);
    return 0;
}

int bf_client_cmd_dashboard(bf_client *cl, int argc, char **argv)
{
    (void)cl;
    bf_dashboard_opts o;
    if (parse_dashboard_args(argc, argv, &o))
        return 2;
    return bf_dashboard_serve(&o);
}
