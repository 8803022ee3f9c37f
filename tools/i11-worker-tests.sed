# i11-worker-tests.sed - tools/i11-worker.sed for the session unit test:
# the test drives a kr_daemon with its one worker (T.w) and reads the
# counters through KR_STAT_GET (include/kr_stats.h).  Idempotent:
#
#   sed -i -f tools/i11-worker-tests.sed tests/unit/check_session.c
s/#include "kr_proxy\.h"/#include "kr_daemon.h"/
s/^\( *\)struct kr_proxy \*p;$/\1struct kr_daemon *p;\n\1struct kr_worker *w;/
s/T\.p->stats\.close_\(client\|bad_input\|upstream\|timeout\|other\)\b/KR_STAT_GET_L(T.w, closes, KR_CLOSE_\U\1\E)/g
s/T\.p->stats\.\([a-z_0-9]*\)/KR_STAT_GET(T.w, \1)/g
s/T\.p->\(sessions\|npipe_used\|npipe_free\|pipe_bytes\)/T.w->\1/g
/kr_proxy_start(T\.p, err, sizeof(err)) == KR_OK/{s/kr_proxy_start/kr_daemon_start/;n;s/$/\n    T.w = kr_daemon_worker(T.p, 0);/}
s/kr_proxy_\(new\|start\|port\|stop\|free\)(/kr_daemon_\1(/g
# keep the lines the longer names make within 80 columns
s/^\( *\)\(KR_STAT_GET(T\.w, responses_dropped)\) + \(KR_STAT_GET(T\.w, conn_accepted)\) +$/\1\2 +\n\1\3 +/
s/^\( *\)while (\(KR_STAT_GET(T\.w, [a-z_]*) < [0-9]*\) && waiting(&w, progress())) {$/\1while (\2 \&\&\n\1       waiting(\&w, progress())) {/
s/^\( *\)\(ck_assert_uint_[a-z]*\)(\(KR_STAT_GET(T\.w, bytes_spliced)\), \(4 \* rlen - 4 \* SPLICE_MIN\));$/\1\2(\3,\n\1                  \4);/
s/^\( \* a\) kr_proxy (/\1 kr_daemon (/
