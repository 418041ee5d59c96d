# Production-like image: the same code, external Postgres (pgvector) and Redis via env.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 NYLON_HOME=/data
WORKDIR /app
RUN apt-get update && apt-get install -y --no-install-recommends build-essential && rm -rf /var/lib/apt/lists/*
# The whole project, not a list of apps: a list once left out proxy/ (in INSTALLED_APPS and the
# URLs) and every container crash-looped. What must stay out is in .dockerignore.
COPY . ./
RUN pip install --no-cache-dir .
RUN useradd --create-home nylon && mkdir -p /data && chown nylon /data
USER nylon
EXPOSE 8000
CMD ["uvicorn", "nylon_project.asgi:application", "--host", "0.0.0.0", "--port", "8000"]
