# Image for the central processes: dispatcher, RQ worker, bot. (The agent is a pip install on GPU servers.)
#   docker build -t trainwarden .
#   docker run --rm -e REDIS_URL=redis://redis:6379/0 trainwarden dispatcher
#   docker run --rm -e REDIS_URL=redis://redis:6379/0 -v /srv/evidence:/app/evidence trainwarden worker
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
RUN pip install --no-cache-dir '.[server,bot]' && mkdir -p /app/evidence && chown trainwarden /app/evidence

USER trainwarden
ENTRYPOINT ["trainwarden"]
CMD ["worker"]
