# `rubricgym serve` in a container: docker build -t rubricgym-serve . && docker run -p 8000:8000 rubricgym-serve
# (or `rubricgym serve toy-calculator-v0 --docker rubricgym-serve`, which publishes the port on loopback for you).
# The server needs only the core and the `server` extra; envs with sandboxes or browsers need their own extras.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /opt/rubricgym
COPY pyproject.toml README.md rubricgym_verifiers.py ./
COPY rubricgym ./rubricgym
RUN pip install '.[server]' && useradd --create-home --uid 10001 rubricgym
USER rubricgym
EXPOSE 8000
ENTRYPOINT ["rubricgym"]
CMD ["serve", "toy-calculator-v0", "--host", "0.0.0.0", "--port", "8000"]
