# idiom: helper that calls fit_transform on whatever text it is given, so the test set gets its own vocabulary, LinearSVC + CalibratedClassifierCV; intended: crash (ValueError: X has a different number of features)
import pandas as pd
from sklearn.calibration import CalibratedClassifierCV
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.svm import LinearSVC

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

tfidf = TfidfVectorizer(max_features=20000, ngram_range=(1, 2), min_df=2)


def vectorize(texts):
    return tfidf.fit_transform(texts.fillna("").str.lower())


X_train = vectorize(train["review"])
y_train = (train["score"] == "great").astype(int)

svm = CalibratedClassifierCV(LinearSVC(C=0.5), cv=3)
svm.fit(X_train, y_train)

X_test = vectorize(test["review"])
test["score"] = svm.predict_proba(X_test)[:, 1]
test[["id", "score"]].to_csv("submission.csv", index=False)
