# Image for the central processes: dispatcher, RQ worker, bot. (The agent is a pip install on GPU servers.)
#   docker build -t trainwarden .
#   docker run --rm -e REDIS_URL=redis://redis:6379/0 trainwarden dispatcher
#   docker run --rm -e REDIS_URL=redis://redis:6379/0 -v /srv/trainwarden:/data trainwarden worker
#   docker run --rm trainwarden demo      # the NaN -> STOP demo: its own redis-server and tmux, inside
# What the processes write (evidence packs, findings.md, archives) goes to /data: the data directory
# (TRAINWARDEN_DATA_DIR below) holds the settings' defaults (evidence/, findings.md, archive/). Mount
# a volume on it; the settings file itself may be mounted read-only (e.g. /config).
# Any uid may run it (`docker run --user UID:0`, compose's TRAINWARDEN_UID): its home and /data are
# writable by group 0, so the owner of a mounted ~/.ssh can read its key.
FROM python:3.11-slim

# tmux and redis-server: `trainwarden demo` starts both; the daemons need neither (Redis is its own service).
RUN apt-get update \
    && apt-get install -y --no-install-recommends tmux redis-server \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 1000 --gid 0 trainwarden \
    && mkdir -p /data \
    && chown trainwarden:0 /data /home/trainwarden \
    && chmod 2775 /data /home/trainwarden

# The dependencies first, pinned (deploy/constraints.txt, generated from the tested set by
# scripts/constraints.py): this layer is rebuilt only when the pins change, not on every code change.
COPY deploy/constraints.txt /tmp/constraints.txt
RUN pip install --no-cache-dir -r /tmp/constraints.txt

WORKDIR /app
COPY pyproject.toml setup.py README.md LICENSE ./
COPY trainwarden ./trainwarden
COPY core ./core
COPY sdk ./sdk
COPY faults ./faults
COPY events ./events
COPY agent ./agent
COPY policies ./policies
COPY workers ./workers
COPY bot ./bot
COPY remote ./remote
COPY archive ./archive
COPY ops ./ops
# Every dependency is already installed above at its pin (a test checks that the pins cover these extras);
# the same constraints hold here, so nothing is upgraded or fetched unpinned.
RUN pip install --no-cache-dir -c /tmp/constraints.txt '.[server,bot,metrics]' \
    && pip check

USER trainwarden
ENV TRAINWARDEN_DATA_DIR=/data HOME=/home/trainwarden USER=trainwarden
WORKDIR /data
VOLUME ["/data"]
# Healthy while this container's own daemon beats (`health --here`: only this host name's components).
HEALTHCHECK --interval=30s --timeout=10s --start-period=60s --retries=3 CMD ["trainwarden", "health", "--here"]
ENTRYPOINT ["trainwarden"]
CMD ["worker"]
