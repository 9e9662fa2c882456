# kafkapy in a container: `docker build -t kafkapy . && docker run -p 9092:9092 -v kafkapy-data:/data kafkapy`
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY kafkapy ./kafkapy
RUN pip install --no-cache-dir .
VOLUME ["/data"]
EXPOSE 9092
# Inside a container the broker must listen on all interfaces; clients reach it as localhost:9092
# through the published port, so that is what it advertises.
CMD ["kafkapy", "serve", "--override", "log.dirs=/data", \
     "--override", "listeners=PLAINTEXT://0.0.0.0:9092", \
     "--override", "advertised.listeners=PLAINTEXT://localhost:9092"]
