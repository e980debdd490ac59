/* Queue (consumer group, at-least-once) checker. Per key (a queue), ops
 * are
 *   publish K R          publish record R
 *   consume K [R...]     (ok) the records delivered to the consumer; none
 *                        for an empty poll
 *   ack K R...           acknowledge delivered records
 *   nack K R...          reject them (recorded; needs no check)
 * Anomalies:
 *   lost        R was published (ok) but never delivered
 *   unacked     R was published (ok) but no ack of it succeeded
 *   double-ack  R was acknowledged (ok), then delivered again by a
 *               delivery that began after that ack was confirmed, and
 *               acknowledged again: a redelivery with no reason (an
 *               unconfirmed or in-flight ack, a nack, a crashed consumer
 *               are reasons; a confirmed ack is not)
 *   unexpected  a delivery of R never published, whose publishes all
 *               failed, or that ended before any publish of it began; or
 *               an ok ack of R before any delivery of it */
#ifndef JEPSEN_QUEUECHECK_H
#define JEPSEN_QUEUECHECK_H

#include <stddef.h>

#include "jepsen/anomaly.h"
#include "jepsen/history.h"

/* Appends the anomalies of `h` to `out`. Returns 0, or -EINVAL (message
 * in err) for an op outside the queue vocabulary or with bad values, or
 * -ENOMEM. */
int jepsen_queuecheck_run(const struct jepsen_history *h,
                          struct jepsen_anomalies *out, char *err,
                          size_t errlen);

#endif
