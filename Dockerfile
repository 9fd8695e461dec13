# Image for the central processes: dispatcher, RQ worker, bot. (The agent is a pip install on GPU servers.)
#   docker build -t trainwarden .
#   docker run --rm -e REDIS_URL=redis://redis:6379/0 trainwarden dispatcher
#   docker run --rm -e REDIS_URL=redis://redis:6379/0 -v /srv/trainwarden:/data trainwarden worker
# What the processes write (evidence packs, findings.md, archives) goes to /data: the data directory
# (TRAINWARDEN_DATA_DIR below) holds the settings' defaults (evidence/, findings.md, archive/). Mount
# a volume on it; the settings file itself may be mounted read-only (e.g. /config).
FROM python:3.11-slim

RUN apt-get update \
    && apt-get install -y --no-install-recommends tmux \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 1000 trainwarden

WORKDIR /app
COPY pyproject.toml setup.py README.md ./
COPY trainwarden ./trainwarden
COPY events ./events
COPY agent ./agent
COPY policies ./policies
COPY workers ./workers
COPY bot ./bot
COPY remote ./remote
COPY archive ./archive
RUN pip install --no-cache-dir '.[server,bot,metrics]' && mkdir -p /data && chown trainwarden /data

USER trainwarden
ENV TRAINWARDEN_DATA_DIR=/data
WORKDIR /data
VOLUME ["/data"]
ENTRYPOINT ["trainwarden"]
CMD ["worker"]
