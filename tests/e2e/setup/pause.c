/*
 * Minimal pod sandbox "pause" process for the e2e images.
 *
 * It only has to keep the sandbox's namespaces alive and exit promptly when
 * the runtime stops the sandbox (SIGTERM/SIGINT); as PID 1 it also reaps any
 * orphaned children so they do not pile up as zombies.
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int sig) {
    (void)sig;
    _exit(0);
}

static void on_child(int sig) {
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

int main(void) {
    struct sigaction stop = {0};
    struct sigaction child = {0};

    stop.sa_handler = on_stop;
    sigaction(SIGTERM, &stop, NULL);
    sigaction(SIGINT, &stop, NULL);
    child.sa_handler = on_child;
    child.sa_flags = SA_NOCLDSTOP | SA_RESTART;
    sigaction(SIGCHLD, &child, NULL);
    for (;;) {
        pause();
    }
    return 0;
}
